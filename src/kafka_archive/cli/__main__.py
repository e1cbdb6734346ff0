import sys

from kafka_archive.cli.app import main

sys.exit(main())
