def widget():
    return "w"
