package pgstore

import "errors"

// Until the batch write's names land in package durability.
const opPersistEvents = "persist events"

var errIndexOverflow = errors.New("event index overflows uint64")
