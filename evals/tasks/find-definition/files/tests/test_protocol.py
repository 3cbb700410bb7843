from src.net.codec import parse_header


def test_parse_header():
    assert parse_header(b"\x00\x00\x00\x01\x00\x00\x00\x05") == {"kind": 1, "length": 5}
