def load(names):
    print("DEBUG: loading", names)
    cleaned = [n.strip().title() for n in names if n.strip()]
    print("DEBUG: cleaned", cleaned)
    return cleaned


def greet(names):
    for name in load(names):
        print(f"Hello, {name}!")
    print("DEBUG: done")


greet(["ada ", "", "grace"])
