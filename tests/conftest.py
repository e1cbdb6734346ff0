"""Settings for every test session."""

from hypothesis import settings

# Property tests check what holds for all inputs, not how fast one example runs: on a shared
# 2-core CI machine an example can take longer than hypothesis' 200 ms default deadline, which
# would fail a correct test.
settings.register_profile("kafka-archive", deadline=None)
settings.load_profile("kafka-archive")
