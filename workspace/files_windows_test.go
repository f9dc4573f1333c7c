package workspace

import "errors"

// mkfifo fails: Windows has no FIFOs in the file system.
func mkfifo(string) error { return errors.New("no FIFOs on Windows") }
