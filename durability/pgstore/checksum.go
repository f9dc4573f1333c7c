package pgstore

import "github.com/polyweave/polyweave-go/durability"

// checksum is the CRC-32C a row keeps: durability.Checksum over the row's
// kind, name, index and data.
func checksum(kind durability.RecordKind, name string, index uint64, data []byte) int32 {
	return int32(durability.Checksum(kind, name, index, data))
}

// summerAfter is how many rows of one actor a read checks with checksum
// before it makes a [durability.Summer], which hashes a row's key with a
// table lookup instead of a chain of them but costs about a dozen key
// hashes to make.
const summerAfter = 16
