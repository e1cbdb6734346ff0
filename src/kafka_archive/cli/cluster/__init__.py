"""`kafka-archive submit`: the job handed to a Spark cluster, and what it ships there."""
