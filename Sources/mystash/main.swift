print("mystash")
