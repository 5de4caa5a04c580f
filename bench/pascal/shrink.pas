{ Seed 000, comment 3 (Pavel's MMTest): COUNT strings, each grown to 20,000
  bytes, touched every 4 KiB, shrunk to 1 byte, all kept; LOOPS times.
    shrink COUNT LOOPS        (the seed: 3000000 10) }
program shrink;
{$mode objfpc}{$H+}
uses {$ifdef USE_SPRY}spry,{$endif} {$ifdef USE_CMEM}cmem,{$endif}
  cthreads, SysUtils, Linux, UnixType;
{$I common.inc}
var
  vStrings: array of string;
  i, n, count, loops, vOffset: Int64;
  t0, t: Double;
begin
  count := ArgInt(1, 3000000);
  loops := ArgInt(2, 10);
  t0 := Now_s;
  for n := 1 to loops do
    begin
      SetLength(vStrings, count);
      for i := Low(vStrings) to High(vStrings) do
        begin
          SetLength(vStrings[i], 20000);
          vOffset := 1;
          while vOffset <= 20000 do
            begin
              vStrings[i][vOffset] := #1;
              Inc(vOffset, 4096);
            end;
          SetLength(vStrings[i], 1);
        end;
    end;
  t := Now_s - t0;
  Report('pascal_shrink', 'seconds=' + Secs(t) + ' count=' + IntToStr(count) +
    ' loops=' + IntToStr(loops));
end.
