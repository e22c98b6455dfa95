"""The run explorer (`graphrunner ui`): a web page and a JSON API over a cluster's store.

`app.make_app(client, users)` builds the Tornado application; handlers live one concern per
module (`api`, `actions`, `pages`), what they show is shaped in `views` and read in `reading`,
and `auth`/`guard` hold who may ask and which requests may change a run.
"""
