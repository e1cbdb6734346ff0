import sys

from kafka_archive.cli.commands import main

sys.exit(main())
