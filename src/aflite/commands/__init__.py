"""Orchestration: read a dataset file, run the library's steps, write a run folder.

This package is what each command does (its library function); :mod:`aflite.rundir.commands` declares them.

Each function here is what one command does, callable from Python with the same files and errors:
:func:`aflite.commands.audit.audit_file` (``aflite audit``), :func:`aflite.commands.embed.embed` (``aflite embed``),
:func:`aflite.commands.explain.explain` (``aflite explain``; its files: :mod:`aflite.explain.files`),
:func:`aflite.commands.evaluate.evaluate_files` (``aflite evaluate``: its test/external sets, then
:func:`aflite.commands.evaluate.evaluate`);
``aflite run``/``filter`` are :func:`aflite.commands.run.run` and :func:`aflite.commands.filter.filter_files`;
every command writes its folder through :class:`aflite.rundir.folder.RunFolder`.
"""
