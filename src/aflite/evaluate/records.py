"""The evaluate records live in :mod:`aflite.rundir.evaluate_records`, below the body that reads them back; this
name is kept for :mod:`aflite.card.facts` until it imports them from there."""

from aflite.rundir.evaluate_records import SetInfo

__all__ = ["SetInfo"]
