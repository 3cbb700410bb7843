import sys


def main():
    print("usage: tool FILE", file=sys.stderr)
