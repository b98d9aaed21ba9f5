"""The job image's entry script: SageMaker's training toolkit (and Braket's local mode) run ``python $SAGEMAKER_PROGRAM``
from /opt/ml/code; qbackends.container does what Braket's own braket_container.py does."""

from qbackends.container import main

raise SystemExit(main())
