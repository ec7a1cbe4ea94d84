// Placeholder until the ZeroMQ service lands: say so rather than pretend to serve.
print("canvasd: the ZeroMQ service is not built yet; only the canvas core and its tests exist.")
