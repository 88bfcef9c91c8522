print("renewal")
