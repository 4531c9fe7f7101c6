"""Orchestration: read a dataset file, run the library's steps, write a run folder.

Each function here is what one command does, callable from Python with the same files and errors:
:func:`aflite.runs.audit.audit_file` (``aflite audit``), :func:`aflite.runs.embed.embed` (``aflite embed``),
:func:`aflite.runs.explain.explain` (``aflite explain``; its files: :mod:`aflite.explain.files`),
:func:`aflite.runs.evaluate.evaluate_files` (``aflite evaluate``: its test/external sets, then
:func:`aflite.runs.evaluate.evaluate`);
``aflite run``/``filter`` are :func:`aflite.runs.run.run` and :func:`aflite.runs.filter.filter_files`; every command
writes its folder through :class:`aflite.rundir.folder.RunFolder`.
"""
