package store

// RunsPerFiring is runsPerFiring, for the tests of the batch bound.
const RunsPerFiring = runsPerFiring
