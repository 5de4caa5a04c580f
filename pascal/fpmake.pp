{ Builds and installs the spry unit like any other FPC package:

    cd pascal
    fpc fpmake.pp && ./fpmake build && ./fpmake install

  To install elsewhere: ./fpmake install --prefix=DIR
  --globalunitdir=/usr/lib/x86_64-linux-gnu/fpc/3.2.2 (Debian's RTL), then
  -Fu DIR/lib/fpc/3.2.2/units/x86_64-linux/spry. The unit links libspry.a
  (or libspry.so with -dSPRY_SHARED) when a program is built: give fpc the
  directory that holds it with -Fl, e.g. -Fl/usr/local/lib after
  `cmake --install build`. }
program fpmake;

{$mode objfpc}{$H+}

uses fpmkunit;

var
  P: TPackage;
begin
  with Installer do
    begin
      P := AddPackage('spry');
      P.Version := '0.1.0';
      P.Description := 'spry memory manager for Free Pascal: a TMemoryManager over ' +
        'libspry (put spry first in the uses clause)';
      P.Author := 'spry';
      P.License := 'see the spry repository';
      P.OSes := [linux];
      P.CPUs := [x86_64];
      P.SourcePath.Add('.');
      P.Targets.AddUnit('spry.pas');
      P.Sources.AddSrc('spry.pas');
      Run;
    end;
end.
