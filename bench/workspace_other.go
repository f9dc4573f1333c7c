//go:build !linux

package main

// namespacePairs is empty: namespaces are Linux's.
func namespacePairs() []pair { return nil }
