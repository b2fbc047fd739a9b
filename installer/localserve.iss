; Inno Setup script: the Windows installer of the desktop bundle (installer/build_bundle.py
; builds dist\localserve\ with PyInstaller first, then runs `iscc installer\localserve.iss`).
; Per user, never for the machine: no administrator rights, files under the user's programs
; folder, and the login tasks `localserve service install --tray` registers for this user.
#define AppVersion GetEnv("LOCALSERVE_VERSION")
#if AppVersion == ""
  #define AppVersion "0.1.0"
#endif

[Setup]
AppId={{6F3A2C1E-6C1B-4E0B-9A52-4C0C2F1B7A11}
AppName=localserve
AppVersion={#AppVersion}
AppPublisher=localserve
DefaultDirName={userpf}\localserve
DefaultGroupName=localserve
PrivilegesRequired=lowest
OutputDir=..\dist
OutputBaseFilename=localserve-{#AppVersion}-setup
Compression=lzma2
SolidCompression=yes
ArchitecturesInstallIn64BitMode=x64compatible
UninstallDisplayIcon={app}\localserve-tray.exe

[Files]
Source: "..\dist\localserve\*"; DestDir: "{app}"; Flags: recursesubdirs ignoreversion

[Icons]
Name: "{group}\localserve tray"; Filename: "{app}\localserve-tray.exe"

[Run]
; The daemon and the tray at every login of this user, then both now.
Filename: "{app}\localserve.exe"; Parameters: "service install --tray"; Flags: runhidden waituntilterminated
Filename: "{app}\localserve-tray.exe"; Flags: nowait postinstall skipifsilent; Description: "Start the localserve tray"

[UninstallRun]
; Exactly what the install registered; the models stay (`localserve service uninstall --purge` removes them).
Filename: "{app}\localserve.exe"; Parameters: "service uninstall --tray"; Flags: runhidden waituntilterminated; RunOnceId: "localserve-service"
