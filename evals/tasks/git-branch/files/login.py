print("login")
