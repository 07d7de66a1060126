package systemd

import (
	"context"
	"errors"
	"fmt"

	"github.com/godbus/dbus/v5"
)

// D-Bus names of systemd's manager.
const (
	systemdService = "org.freedesktop.systemd1"
	systemdPath    = dbus.ObjectPath("/org/freedesktop/systemd1")
	systemdManager = "org.freedesktop.systemd1.Manager"
	noSuchUnit     = "org.freedesktop.systemd1.NoSuchUnit"
)

// Bus is a private connection to the system bus.
type Bus struct {
	conn *dbus.Conn
}

// Connect connects to the system bus.
func Connect(ctx context.Context) (*Bus, error) {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("connect to the system bus: %w", err)
	}
	return &Bus{conn: conn}, nil
}

// Close closes the connection; a lock taken through it stays held while its file is open.
func (b *Bus) Close() error { return b.conn.Close() }

// StopUnit asks systemd to stop a unit and does not wait for the job. A unit systemd
// does not know is stopped already.
func (b *Bus) StopUnit(ctx context.Context, name string) error {
	var job dbus.ObjectPath
	err := b.conn.Object(systemdService, systemdPath).CallWithContext(ctx, systemdManager+".StopUnit", 0, name, "replace").Store(&job)
	var e dbus.Error
	if errors.As(err, &e) && e.Name == noSuchUnit {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop unit %s: %w", name, err)
	}
	return nil
}

// killUnit sends a signal to a unit's main process.
func (b *Bus) killUnit(ctx context.Context, name string, signal int32) error {
	err := b.conn.Object(systemdService, systemdPath).CallWithContext(ctx, systemdManager+".KillUnit", 0, name, "main", signal).Err
	if err != nil {
		return fmt.Errorf("signal unit %s: %w", name, err)
	}
	return nil
}

// Property is a unit property, as StartTransientUnit and SetUnitProperties take them.
type Property struct {
	Name  string
	Value dbus.Variant
}

// Uint64Property is a property of type t (MemoryMax, CPUWeight, CPUQuotaPerSecUSec).
func Uint64Property(name string, v uint64) Property {
	return Property{Name: name, Value: dbus.MakeVariant(v)}
}

const unitExists = "org.freedesktop.systemd1.UnitExists"

// EnsureSlice gives the slice name props: it starts it as a transient unit when systemd
// has none of that name running, else sets them on the one it has, for this boot
// (runtime). systemd makes the parent slices its name implies.
func (b *Bus) EnsureSlice(ctx context.Context, name string, props []Property) error {
	obj := b.conn.Object(systemdService, systemdPath)
	aux := []struct {
		Name  string
		Props []Property
	}{}
	var job dbus.ObjectPath
	err := obj.CallWithContext(ctx, systemdManager+".StartTransientUnit", 0, name, "replace", props, aux).Store(&job)
	var e dbus.Error
	if errors.As(err, &e) && e.Name == unitExists {
		err = obj.CallWithContext(ctx, systemdManager+".SetUnitProperties", 0, name, true, props).Err
	}
	if err != nil {
		return fmt.Errorf("set up slice %s: %w", name, err)
	}
	return nil
}
