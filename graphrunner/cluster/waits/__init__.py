"""The kinds of wait a suspended step keeps, one module each, behind one protocol (`base`)."""
