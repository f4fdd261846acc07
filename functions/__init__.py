"""The Lambda functions' handlers, one folder each (`<name>/handler.py`): see README.md beside this file.

Installed as the package `citewise_functions`, so that `citewise serve` (`citewise_local.server`) finds the
very handlers Lambda runs from an installed wheel as well as from a checkout. Each folder is a code asset
of its own in CDK; this file is not part of any of them.
"""
