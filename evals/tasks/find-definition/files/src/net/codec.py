import struct


def parse_header(raw):
    """Decode the 8-byte message header."""
    kind, length = struct.unpack(">II", raw)
    return {"kind": kind, "length": length}


def encode_header(kind, length):
    return struct.pack(">II", kind, length)
