"""The dataset card of a run's filtered release (``aflite card``): the facts read from the run's folders
(:mod:`~aflite.card.facts`), the known limits (:mod:`~aflite.card.limits`), the README.md
(:mod:`~aflite.card.render`) with its YAML front matter (:mod:`~aflite.card.frontmatter`), and
:func:`write_card`, which writes them (:mod:`~aflite.card.write`)."""

from aflite.card.write import CardResult, write_card

__all__ = ["CardResult", "write_card"]
