"""A2A 0.3 beside 1.0: the `a2a.v1.A2AService` face, translated to the 1.0 model at the servicer, and the card
both versions read."""
