def c():
    pass  # TODO remove
