"""PARTITIONBY and the object layout: which path a record goes to, and the keys of objects
(Lenses' and Confluent's layouts, Hive-style folders, escaped values)."""
