"""np report: the experiment's pipeline table, post-hoc rounds, and the project view, as data and renderings."""
