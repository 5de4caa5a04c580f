{ Built with -gh: heaptrc is installed before every unit of the uses
  clause and calls the RTL heap directly, so spry steps aside. The program
  runs, and heaptrc reports the one block left unfreed (the script checks
  its log). }
program test_heaptrc;
{$mode objfpc}{$H+}
uses spry, cthreads, Classes, SysUtils;

{$I check.inc}

var
  p: Pointer;
  sl: TStringList;
  i: Integer;
begin
  Check(not SpryInstalled, 'spry replaced heaptrc');
  sl := TStringList.Create;
  for i := 1 to 1000 do sl.Add(IntToStr(i));
  sl.Free;
  p := GetMem(123);        { left for heaptrc to find }
  Check(p <> nil, 'GetMem');
  Done('test_heaptrc');
end.
