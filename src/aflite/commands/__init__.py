"""Each command as a library function, with the same files and errors (:mod:`aflite.rundir.commands` declares
them); every one writes its folder through :class:`aflite.rundir.folder.RunFolder`.
"""
