"""Rye graph files: the walker-era format of a graph tool (an envelope, `config_schema`,
`permissions`, and the graph under `config:`), recognised and translated into graphrunner's
own model. Imported only when a file is a Rye file."""
