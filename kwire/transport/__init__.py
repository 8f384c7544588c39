"""Sockets: accept loops, the request-byte budget, SO_RCVLOWAT and connections to other brokers."""
