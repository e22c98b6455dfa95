"""A module that fails while it is imported, named by graphs in the loader tests."""

raise RuntimeError("this module refuses to be imported")
