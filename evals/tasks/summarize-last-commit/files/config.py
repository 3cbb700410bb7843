DEBUG = False
MAX_UPLOAD_MB = 10
ALLOWED_TYPES = ["image/png", "image/jpeg"]
