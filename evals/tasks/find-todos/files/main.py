def a():
    # TODO: handle empty input
    return 1
