from .codec import parse_header


def read_message(stream):
    header = parse_header(stream.read(8))
    return stream.read(header["length"])
