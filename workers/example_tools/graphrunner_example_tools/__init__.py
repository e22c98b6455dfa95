"""Example graphrunner tools: `example.slugify` and `example.word_count`.

Published to every worker through the `graphrunner.tools` entry-point group (see pyproject.toml).
"""

from graphrunner_example_tools.slugify import SlugifyParams, SlugifyTool, slugify
from graphrunner_example_tools.word_count import WordCountParams, WordCountTool, count_words

__version__ = "0.1.0"

__all__ = [
    "SlugifyParams",
    "SlugifyTool",
    "WordCountParams",
    "WordCountTool",
    "count_words",
    "slugify",
]
