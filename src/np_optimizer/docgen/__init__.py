"""Generated documentation: docs/compatibility.md (`python -m np_optimizer.docgen.compatibility`) and docs/errors.md
(`python -m np_optimizer.docgen.errors`), each rendered from the one table it documents."""
