"""`python -m np_optimizer` is `np`."""

from np_optimizer.cli.main import entry

entry()
