print("sim")
