def greet(name):
    """Say hello to someone."""
    return f"Hello, {name}!"


class Greeter:
    def wave(self):
        return greet("world")
