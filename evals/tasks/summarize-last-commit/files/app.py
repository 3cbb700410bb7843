from config import ALLOWED_TYPES, MAX_UPLOAD_MB


def check_upload(content_type, size_bytes):
    if content_type not in ALLOWED_TYPES:
        return "unsupported type"
    if size_bytes > MAX_UPLOAD_MB * 1024 * 1024:
        return "too large"
    return "ok"
