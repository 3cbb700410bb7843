import argparse
import sys

from tidyup import __version__


def tidy(text):
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tidyup")
    parser.add_argument("--version", action="version", version=f"tidyup {__version__}")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)
    for name in args.files:
        with open(name) as f:
            text = f.read()
        with open(name, "w") as f:
            f.write(tidy(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
