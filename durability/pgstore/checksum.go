package pgstore

import "github.com/polyweave/polyweave-go/durability"

// checksum is the CRC-32C a row keeps: durability.Checksum over the row's
// kind, name, index and data.
func checksum(kind durability.RecordKind, name string, index uint64, data []byte) int32 {
	return int32(durability.Checksum(kind, name, index, data))
}
