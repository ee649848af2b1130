// libbluetooth (BlueZ) socket definitions: AF_BLUETOOTH, HCI user channel, L2CAP.
// The shim exists so SwiftPM can find the headers via pkg-config and so Swift sees the constants.
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>
#include <bluetooth/l2cap.h>

#ifndef HCI_CHANNEL_USER
#define HCI_CHANNEL_USER 1
#endif

static inline int cbluez_hci_channel_user(void) { return HCI_CHANNEL_USER; }
