# A stand-in for the staged source (infra/scripts/build-source.sh): the
# archive is mocked in module.tftest.hcl, only the precondition reads these.
