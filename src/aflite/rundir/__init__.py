"""Output folders, below the commands that write them: the file names (:mod:`~aflite.rundir.names`), claiming a
folder (:mod:`~aflite.rundir.lock`), the filter's checkpoint (:mod:`~aflite.rundir.checkpoint`), the versions and
the results.json envelope with the :class:`~aflite.rundir.results.Result` every command returns
(:mod:`~aflite.rundir.versions`, :mod:`~aflite.rundir.results`), and the one reader of folders
(:mod:`~aflite.rundir.read`). :class:`aflite.rundir.folder.RunFolder` puts them together for a command."""
