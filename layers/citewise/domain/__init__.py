"""What every other module builds on and that depends on none of them: the models, the error
hierarchy, tenancy, metadata and the one access rule."""
